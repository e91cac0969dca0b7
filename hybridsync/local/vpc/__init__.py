"""VPC, locally: what a VPC-attached function reaches, enforced in its worker (`network`)."""
