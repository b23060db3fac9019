"""Persistence: SQLAlchemy tables and the database lifetime."""
