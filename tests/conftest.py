"""Suite-wide fixtures and settings. Shared fixture modules live in tests/fixtures/ and are
registered here.

- tests/fixtures/postgres.py: `postgres_server`, `postgres_url`, `postgres_factory` (a real,
  private PostgreSQL from Debian's packages; see that module's docstring).
- Hypothesis runs the `repeatable` profile: the same examples on every run, so that `make test`
  (and CI) pass or fail on the code, not on a draw. Property tests still search: run
  `pytest --hypothesis-profile=explore` (2,000 random examples a test) to look for new
  counterexamples, and pin each one found with `@example`.
"""

from hypothesis import settings

pytest_plugins = ["tests.fixtures.postgres"]

settings.register_profile("repeatable", derandomize=True)
settings.register_profile("explore", max_examples=2000, deadline=None)
settings.load_profile("repeatable")
