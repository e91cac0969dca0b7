"""The shop's HTTP routes (`[tool.hybridsync] routes = ["shop.routes"]`): importing this package
registers them with the engine's API function."""

from shop.routes import reads, writes  # noqa: F401 - registers the routes
