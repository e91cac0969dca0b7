"""The live console of `hybridsync up`: the running app as a diagram with its figures, throughput and
freshness charts, dead letters with a redrive button, alarms, drift per entity, and the trace of any
change, at the URL the banner prints (127.0.0.1 only)."""
