"""What a workload needs and costs, on paper: each access pattern's price beside its naive
alternative, from the capacity model's rules (costs), and what the pipeline needs at a described
rate and what it costs a month (plan). The arithmetic behind `hybridsync cost` and `hybridsync
plan`: a tool of the command line, never shipped to Lambda."""
