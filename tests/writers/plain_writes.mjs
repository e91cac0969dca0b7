// Orders and order lines written the way an existing service writes them with the AWS SDK for
// JavaScript v3, knowing nothing of hybridsync: no entity tag (but one put that sets it), no version
// (but one DynamoDBMapper-style counter), arithmetic updates, deletes, batches and transactions.
// tests/integration/test_any_writer.py runs it against the local app's DynamoDB endpoint.
//
//   DYNAMODB_ENDPOINT=http://127.0.0.1:8000 TABLE=hybridsync-main PREFIX=ab12cd-js node plain_writes.mjs
//
// It prints one JSON line: every key it wrote and the attributes it means the item to hold last
// (DynamoDB JSON), or null for a key it deleted last.

import {
  BatchWriteItemCommand,
  DeleteItemCommand,
  DynamoDBClient,
  PutItemCommand,
  TransactWriteItemsCommand,
  UpdateItemCommand,
} from "@aws-sdk/client-dynamodb";

const { DYNAMODB_ENDPOINT: endpoint, TABLE: TableName, PREFIX: prefix } = process.env;
if (!endpoint || !TableName || !prefix) {
  console.error("DYNAMODB_ENDPOINT, TABLE and PREFIX are required");
  process.exit(2);
}
const client = new DynamoDBClient({
  endpoint,
  region: process.env.AWS_REGION ?? "us-east-1",
  credentials: {
    accessKeyId: process.env.AWS_ACCESS_KEY_ID ?? "local",
    secretAccessKey: process.env.AWS_SECRET_ACCESS_KEY ?? "local",
  },
});

const S = (value) => ({ S: String(value) });
const N = (value) => ({ N: String(value) });
const CREATED = "2026-11-22T07:00:00.000Z";
const customer = `${prefix}-c1`;
const product = (n) => `${prefix}-p${n}`;
const expected = new Map(); // "PK|SK" -> { key, item }

function orderKey(id) {
  return { PK: S(`CUSTOMER#${customer}`), SK: S(`ORDER#${CREATED}#${id}`) };
}
function lineKey(id, lineNo) {
  return { PK: S(`CUSTOMER#${customer}`), SK: S(`ORDER#${CREATED}#${id}#LINE#${String(lineNo).padStart(4, "0")}`) };
}
function order(id, total, extra = {}) {
  return { ...orderKey(id), OrderId: S(id), CustomerId: S(customer), CreatedAt: S(CREATED),
           Status: S("OPEN"), Total: N(total), ...extra };
}
function line(id, lineNo, productNo, quantity, unitPrice, extra = {}) {
  return { ...lineKey(id, lineNo), OrderId: S(id), CustomerId: S(customer), CreatedAt: S(CREATED),
           Status: S("OPEN"), LineNo: N(lineNo), ProductId: S(product(productNo)), Quantity: N(quantity),
           UnitPrice: N(unitPrice), ...extra };
}
function expect(key, item) {
  expected.set(`${key.PK.S}|${key.SK.S}`, { key, item });
}
const keyOf = (item) => ({ PK: item.PK, SK: item.SK });

async function put(item) {
  await client.send(new PutItemCommand({ TableName, Item: item }));
  expect(keyOf(item), item);
}

// 1. bare PutItem: the model's keys and fields, no Entity, no Version
const o1 = `${prefix}-o1`;
await put(order(o1, "30.00"));
await put(line(o1, 1, 1, 2, "500"));
await put(line(o1, 2, 2, 1, "2000"));
await put(line(o1, 3, 1, 1, "500"));

// 2. a tagged put (Entity), still no Version
const o2 = `${prefix}-o2`;
await put(order(o2, "8.00", { Entity: S("Order") }));
await put(line(o2, 1, 2, 4, "200", { Entity: S("OrderLine") }));

// 3. a DynamoDBMapper-style counter: Version 1, 2, 3 by conditional UpdateItem, a delete at 3,
// then the item made again at Version 1 (as a new object saved by the mapper is)
const o3 = `${prefix}-o3`;
async function mapperSave(item, version, previous) {
  const { PK, SK, ...attributes } = item;
  const names = {};
  const values = { ":version": N(version) };
  const sets = ["#Version = :version"];
  names["#Version"] = "Version";
  for (const [name, value] of Object.entries(attributes)) {
    names[`#${name}`] = name;
    values[`:${name}`] = value;
    sets.push(`#${name} = :${name}`);
  }
  let condition = "attribute_not_exists(#Version)";
  if (previous !== undefined) {
    condition = "#Version = :previous";
    values[":previous"] = N(previous);
  }
  await client.send(new UpdateItemCommand({
    TableName, Key: { PK, SK }, UpdateExpression: `SET ${sets.join(", ")}`,
    ConditionExpression: condition, ExpressionAttributeNames: names, ExpressionAttributeValues: values,
  }));
  expect({ PK, SK }, { ...item, Version: N(version) });
}
async function mapperDelete(key, version) {
  await client.send(new DeleteItemCommand({
    TableName, Key: key, ConditionExpression: "#Version = :version",
    ExpressionAttributeNames: { "#Version": "Version" }, ExpressionAttributeValues: { ":version": N(version) },
  }));
  expect(key, null);
}
await mapperSave(order(o3, "11.00"), 1);
await mapperSave(line(o3, 1, 1, 1, "1100"), 1);
await mapperSave(order(o3, "22.00"), 2, 1);
await mapperSave(line(o3, 1, 1, 2, "1100"), 2, 1);
await mapperSave(order(o3, "33.00"), 3, 2);
await mapperSave(line(o3, 1, 1, 3, "1100"), 3, 2);
await mapperDelete(lineKey(o3, 1), 3);
await mapperDelete(orderKey(o3), 3);
await mapperSave(order(o3, "7.50"), 1); // re-created: its counter starts again at 1
await mapperSave(line(o3, 1, 2, 3, "250"), 1);

// 4. arithmetic on numbers of untagged items: SET Quantity = Quantity + :d, SET Total = Total + :d
async function add(key, attribute, delta) {
  const { Attributes } = await client.send(new UpdateItemCommand({
    TableName, Key: key, UpdateExpression: "SET #a = #a + :d",
    ExpressionAttributeNames: { "#a": attribute }, ExpressionAttributeValues: { ":d": N(delta) },
    ReturnValues: "ALL_NEW",
  }));
  expect(key, Attributes);
}
await add(lineKey(o1, 1), "Quantity", 3);
await add(orderKey(o1), "Total", "15.00");

// 5. a status change: the tagged order and its line cancelled
async function cancel(key) {
  const { Attributes } = await client.send(new UpdateItemCommand({
    TableName, Key: key, UpdateExpression: "SET #s = :s",
    ExpressionAttributeNames: { "#s": "Status" }, ExpressionAttributeValues: { ":s": S("CANCELLED") },
    ReturnValues: "ALL_NEW",
  }));
  expect(key, Attributes);
}
await cancel(orderKey(o2));
await cancel(lineKey(o2, 1));

// 6. DeleteItem of an untagged line
await client.send(new DeleteItemCommand({ TableName, Key: lineKey(o1, 3) }));
expect(lineKey(o1, 3), null);

// 7. BatchWriteItem: three puts and a delete
const o4 = `${prefix}-o4`;
const batch = [order(o4, "9.00"), line(o4, 1, 1, 1, "400"), line(o4, 2, 2, 1, "500")];
let requests = {
  [TableName]: [
    ...batch.map((Item) => ({ PutRequest: { Item } })),
    { DeleteRequest: { Key: lineKey(o1, 2) } },
  ],
};
for (let attempt = 0; Object.keys(requests).length; attempt++) {
  if (attempt === 10) throw new Error("BatchWriteItem: items left unprocessed");
  const { UnprocessedItems } = await client.send(new BatchWriteItemCommand({ RequestItems: requests }));
  requests = UnprocessedItems ?? {};
}
batch.forEach((item) => expect(keyOf(item), item));
expect(lineKey(o1, 2), null);

// 8. TransactWriteItems: an order placed with its line, another's line changed, one deleted, the
// total adjusted, on the condition that the first order still exists
const o5 = `${prefix}-o5`;
const placed = [order(o5, "6.00"), line(o5, 1, 1, 2, "300")];
await client.send(new TransactWriteItemsCommand({
  TransactItems: [
    ...placed.map((Item) => ({ Put: { TableName, Item, ConditionExpression: "attribute_not_exists(PK)" } })),
    { Update: { TableName, Key: lineKey(o4, 1), UpdateExpression: "SET #q = #q + :one",
                ExpressionAttributeNames: { "#q": "Quantity" }, ExpressionAttributeValues: { ":one": N(1) } } },
    { Delete: { TableName, Key: lineKey(o4, 2) } },
    { Update: { TableName, Key: orderKey(o4), UpdateExpression: "SET #t = #t - :five",
                ExpressionAttributeNames: { "#t": "Total" }, ExpressionAttributeValues: { ":five": N("5.00") } } },
    { ConditionCheck: { TableName, Key: orderKey(o1), ConditionExpression: "attribute_exists(PK)" } },
  ],
}));
placed.forEach((item) => expect(keyOf(item), item));
expect(lineKey(o4, 1), { ...line(o4, 1, 1, 2, "400") });
expect(lineKey(o4, 2), null);
expect(orderKey(o4), order(o4, "4.00"));

client.destroy();
console.log(JSON.stringify({ items: [...expected.values()] }));
