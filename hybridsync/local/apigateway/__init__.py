"""API Gateway (HTTP API), locally: the routes served over the app's functions (`responses`)."""
