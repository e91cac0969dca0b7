"""IAM, locally: each function's calls checked against its execution role (`policies`)."""
