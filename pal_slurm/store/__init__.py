"""The store: SQLAlchemy models behind a small repository interface; Alembic migrations."""
