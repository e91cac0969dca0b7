"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-22 07:49:25.933677
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "customers",
        sa.Column("customer_id", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("email", sa.Text(), nullable=False),
        sa.Column("tier", sa.Text(), nullable=True),
        sa.Column(
            "version",
            sa.BigInteger(),
            server_default=sa.text("(extract(epoch from clock_timestamp()) * 1000)::bigint"),
            nullable=False,
        ),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("customer_id", name=op.f("pk_customers")),
        comment="customer profile, cached from PostgreSQL on read",
    )
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
        "follows",
        sa.Column("follower_id", sa.Text(), nullable=False),
        sa.Column("followee_id", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("deleted", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("follower_id", "followee_id", name=op.f("pk_follows")),
        comment="adjacency list edge; the Inverted GSI answers who follows A (pattern 19)",
    )
    op.create_table(
        "order_lines",
        sa.Column("order_id", sa.Text(), nullable=False),
        sa.Column("customer_id", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("line_no", sa.BigInteger(), nullable=False),
        sa.Column("product_id", sa.Text(), nullable=False),
        sa.Column("quantity", sa.BigInteger(), nullable=False),
        sa.Column("unit_price", sa.Numeric(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("deleted", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("order_id", "line_no", name=op.f("pk_order_lines")),
        comment="order line next to its order: begins_with(SK, ORDER#<time>#<id>) reads both",
    )
    op.create_table(
        "orders",
        sa.Column("order_id", sa.Text(), nullable=False),
        sa.Column("customer_id", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("total", sa.Numeric(), nullable=False),
        sa.Column("shipping_address", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("deleted", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("order_id", name=op.f("pk_orders")),
        comment="order header in the customer's collection: a date range is one Query (pattern 2)",
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
    op.create_table(
        "player_scores",
        sa.Column("player_id", sa.Text(), nullable=False),
        sa.Column("score", sa.BigInteger(), nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.Column("deleted", sa.Boolean(), server_default=sa.text("false"), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("player_id", name=op.f("pk_player_scores")),
        comment="loyalty game score; the score is a GSI sort key, never a primary key (pattern 6)",
    )
    op.create_table(
        "product_availability",
        sa.Column("product_id", sa.Text(), nullable=False),
        sa.Column("price", sa.Numeric(), nullable=False),
        sa.Column("stock", sa.BigInteger(), nullable=False),
        sa.Column(
            "version",
            sa.BigInteger(),
            server_default=sa.text("(extract(epoch from clock_timestamp()) * 1000)::bigint"),
            nullable=False,
        ),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("product_id", name=op.f("pk_product_availability")),
        comment="small, fast-changing price and stock: a price change rewrites only this (pattern 16)",
    )
    op.create_table(
        "products",
        sa.Column("product_id", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("category", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("attributes", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column(
            "version",
            sa.BigInteger(),
            server_default=sa.text("(extract(epoch from clock_timestamp()) * 1000)::bigint"),
            nullable=False,
        ),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("product_id", name=op.f("pk_products")),
        comment="large, static catalog part of a product (pattern 16)",
    )


def downgrade() -> None:
    op.drop_table("products")
    op.drop_table("product_availability")
    op.drop_table("player_scores")
    op.drop_table("outbox")
    op.drop_table("orders")
    op.drop_table("order_lines")
    op.drop_table("follows")
    op.drop_index(
        "ix_dead_letters_pending", table_name="dead_letters", postgresql_where=sa.text("redriven_at IS NULL")
    )
    op.drop_table("dead_letters")
    op.drop_table("customers")
