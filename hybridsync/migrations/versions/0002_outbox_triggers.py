"""outbox triggers on the tables mastered in PostgreSQL

Every INSERT, UPDATE or DELETE on customers, products and product_availability writes one outbox
row in the same transaction (table, key, operation, version, payload) and NOTIFYs
`hybridsync_outbox`; an UPDATE first moves the row's version past its previous one, and a
DELETE's outbox version is past the deleted row's, so DynamoDB can order every change of a key.

Revision ID: 0002
Revises: 0001
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# table -> its key columns (the SQL keys of the entities mastered in PostgreSQL)
TABLES = {"customers": ["customer_id"], "products": ["product_id"], "product_availability": ["product_id"]}
NOW_MS = "(extract(epoch from clock_timestamp()) * 1000)::bigint"


def upgrade() -> None:
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
    for table, key in TABLES.items():
        op.execute(f"""
            CREATE TRIGGER {table}_version BEFORE UPDATE ON {table}
            FOR EACH ROW EXECUTE FUNCTION hybridsync_next_version()
        """)
        op.execute(f"""
            CREATE TRIGGER {table}_outbox AFTER INSERT OR UPDATE OR DELETE ON {table}
            FOR EACH ROW EXECUTE FUNCTION hybridsync_outbox({", ".join(f"'{k}'" for k in key)})
        """)


def downgrade() -> None:
    for table in TABLES:
        op.execute(f"DROP TRIGGER {table}_outbox ON {table}")
        op.execute(f"DROP TRIGGER {table}_version ON {table}")
    op.execute("DROP FUNCTION hybridsync_outbox()")
    op.execute("DROP FUNCTION hybridsync_next_version()")
