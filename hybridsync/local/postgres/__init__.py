"""PostgreSQL, locally (RDS's part): the embedded server (`server`) and the database's logins
(`logins`: RDS Proxy's IAM login stood in by its secret)."""
