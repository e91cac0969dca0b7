"""the engine's tables and trigger functions: the outbox, the dead letters, and the functions
every PostgreSQL-mastered table's triggers call (a project's revisions create those triggers)

`hybridsync_next_version()` moves a row's version past its previous one on UPDATE;
`hybridsync_outbox(key columns...)` writes one outbox row per INSERT, UPDATE or DELETE in the same
transaction (table, key, operation, version, payload) and NOTIFYs `hybridsync_outbox`; a DELETE's
outbox version is past the deleted row's, so DynamoDB can order every change of a key.

Revision ID: hybridsync_0001
Revises:
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "hybridsync_0001"
down_revision = None
branch_labels = ("hybridsync",)
depends_on = None

NOW_MS = "(extract(epoch from clock_timestamp()) * 1000)::bigint"


def upgrade() -> None:
    op.create_table(
        "dead_letters",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("source", sa.Text(), nullable=False),
        sa.Column("event_id", sa.Text(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("record", postgresql.JSON(astext_type=sa.Text()), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("redriven_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dead_letters")),
        sa.UniqueConstraint("source", "event_id", name="uq_dead_letters_source_event"),
        comment="records a consumer could not apply, with the reason; redriven by the CLI",
    )
    op.create_index(
        "ix_dead_letters_pending",
        "dead_letters",
        ["source", "id"],
        unique=False,
        postgresql_where=sa.text("redriven_at IS NULL"),
    )
    op.create_table(
        "outbox",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("table_name", sa.Text(), nullable=False),
        sa.Column("operation", sa.Text(), nullable=False),
        sa.Column("row_key", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("payload", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_outbox")),
        comment="one row per change of a table mastered in PostgreSQL, drained into DynamoDB",
    )
    op.execute(f"""
        CREATE FUNCTION hybridsync_next_version() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            NEW.version := greatest({NOW_MS}, OLD.version + 1);
            NEW.updated_at := now();
            RETURN NEW;
        END $$;
    """)
    op.execute(f"""
        CREATE FUNCTION hybridsync_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            image jsonb := to_jsonb(CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END);
            key jsonb := (SELECT jsonb_object_agg(k, image -> k) FROM unnest(TG_ARGV) AS k);
        BEGIN
            INSERT INTO outbox (table_name, operation, row_key, version, payload)
            VALUES (
                TG_TABLE_NAME, TG_OP, key,
                CASE WHEN TG_OP = 'DELETE' THEN greatest({NOW_MS}, (image ->> 'version')::bigint + 1)
                     ELSE (image ->> 'version')::bigint END,
                CASE WHEN TG_OP = 'DELETE' THEN NULL ELSE image END
            );
            PERFORM pg_notify('hybridsync_outbox', TG_TABLE_NAME);
            RETURN NULL;
        END $$;
    """)


def downgrade() -> None:
    op.execute("DROP FUNCTION hybridsync_outbox()")
    op.execute("DROP FUNCTION hybridsync_next_version()")
    op.drop_table("outbox")
    op.drop_index(
        "ix_dead_letters_pending", table_name="dead_letters", postgresql_where=sa.text("redriven_at IS NULL")
    )
    op.drop_table("dead_letters")
