"""DynamoDB, locally: AWS's DynamoDB Local (`server`), the app's DynamoDB Streams as production
shapes them (`shards`: the state; the Streams API's wire), the stream readers (`streams`), TTL (`ttl`)
and the faults injected on the functions' DynamoDB calls (`faults`)."""
