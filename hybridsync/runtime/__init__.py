"""Where a function runs and how it reaches its services: the settings the stacks put in its
environment (settings), boto3 clients pointed at local endpoints when they are given (aws),
PostgreSQL engines (db), the clients a Lambda container builds once and keeps (clients), and the
probe every handler answers, which tries from inside a function what it can reach (doctor). It
stands on the model (a container loads the user's model) and under both sides of the sync."""
