"""The application's write path: plain functions over injected clients, one module per capability."""
