"""The HTTP edge: what every route shares (web: the resolver, parameters that answer 400 naming
themselves, JSON bodies, one error envelope, signed page cursors bound to each request) and the
OpenAPI document generated from the routes as they register (openapi). The engine's routes and a
project's own are written with it; it reads through the reads package and writes through both
sides below."""
