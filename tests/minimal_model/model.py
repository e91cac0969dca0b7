"""The minimal model: one table `records` (keys `pk`/`sk`, a stream, no GSIs, no TTL), one entity
mastered in DynamoDB, one in PostgreSQL, and an aggregate with no rank (there is no index to rank
in), under reserved names of its own."""

from hybridsync.model.declare import (
    NEW_AND_OLD_IMAGES,
    Aggregate,
    Count,
    Entity,
    Field,
    FieldType,
    KeyAttribute,
    Model,
    Names,
    Period,
    Side,
    Source,
    Sum,
    Table,
    Template,
    Where,
)

RECORDS = Table("records", partition=KeyAttribute("pk"), sort=KeyAttribute("sk"), stream=NEW_AND_OLD_IMAGES)

NOTE = Entity(
    "Note",
    RECORDS,
    Side.DYNAMODB,
    fields=(
        Field("NoteId", FieldType.STRING, max_length=40),
        Field("Author", FieldType.STRING),
        Field("WrittenAt", FieldType.TIMESTAMP),
        Field("Words", FieldType.INTEGER),
        Field("Kind", FieldType.STRING),
        Field("Tags", FieldType.JSON, required=False),
        Field("Flag", FieldType.BOOLEAN, required=False),
        Field("Blob", FieldType.BINARY, required=False),
    ),
    keys={"pk": Template("note:{NoteId}"), "sk": Template("note")},
    sql_table="notes",
    sql_key=("NoteId",),
)

RETRACTION = Entity(
    "Retraction",
    RECORDS,
    Side.DYNAMODB,
    fields=(
        Field("RetractionId", FieldType.STRING),
        Field("Author", FieldType.STRING),
        Field("WrittenAt", FieldType.TIMESTAMP),
        Field("Words", FieldType.INTEGER),
    ),
    keys={"pk": Template("retraction:{RetractionId}"), "sk": Template("retraction")},
)

AUTHOR = Entity(
    "Author",
    RECORDS,
    Side.POSTGRESQL,
    fields=(
        Field("AuthorId", FieldType.STRING),
        Field("Name", FieldType.STRING),
        Field("Joined", FieldType.TIMESTAMP, required=False),
        Field("Score", FieldType.DECIMAL),
    ),
    keys={"pk": Template("author:{AuthorId}"), "sk": Template("profile")},
    sql_table="authors",
    sql_key=("AuthorId",),
)

WORDS = Aggregate(
    "WordsPerAuthor",
    sources=(Source(NOTE, where=Where("Kind", none_of=("draft",))), Source(RETRACTION, sign=-1)),
    group_by=("Author",),
    time="WrittenAt",
    periods=(Period.DAY, Period.YEAR),
    measures=(Sum("Words", of="Words"), Count("Notes")),
    partition="author:{Author}",
    sort="words:{Period}",
)

MODEL = Model(
    tables=(RECORDS,),
    entities=(NOTE, RETRACTION, AUTHOR),
    aggregates=(WORDS,),
    names=Names(entity="kind_of", version="rev", origin="from"),
    reserved_prefix="engine:",
)
