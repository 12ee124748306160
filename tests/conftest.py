"""Suite-wide fixtures. Shared fixture modules live in tests/fixtures/ and are registered here.

- tests/fixtures/postgres.py: `postgres_server`, `postgres_url`, `postgres_factory` (a real,
  private PostgreSQL from Debian's packages; see that module's docstring).
"""

pytest_plugins = ["tests.fixtures.postgres"]
