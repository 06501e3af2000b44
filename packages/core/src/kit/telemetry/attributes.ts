/**
 * Attribute names of the adapters' spans and metrics: the OpenTelemetry messaging semantic conventions
 * (https://opentelemetry.io/docs/specs/semconv/messaging/) and this project's own `idempotency.*`.
 * @packageDocumentation
 */

/** `messaging.system`: `rabbitmq`, `kafka` or `aws_sqs` (semconv). */
export const ATTR_MESSAGING_SYSTEM = 'messaging.system';
/** `messaging.operation.type`: `process` on a consumer's span per message (semconv). */
export const ATTR_MESSAGING_OPERATION_TYPE = 'messaging.operation.type';
/** `messaging.operation.name`: the system-specific operation, `process` here (semconv). */
export const ATTR_MESSAGING_OPERATION_NAME = 'messaging.operation.name';
/** `messaging.destination.name`: the queue (RabbitMQ, SQS: the name in the queue URL) or topic (semconv). */
export const ATTR_MESSAGING_DESTINATION_NAME = 'messaging.destination.name';
/** `messaging.destination.partition.id`: the Kafka partition, as a string (semconv). */
export const ATTR_MESSAGING_DESTINATION_PARTITION_ID = 'messaging.destination.partition.id';
/** `messaging.message.id`: the AMQP `messageId` property, the SQS `MessageId` (semconv). */
export const ATTR_MESSAGING_MESSAGE_ID = 'messaging.message.id';
/** `messaging.consumer.group.name`: the Kafka consumer group (`groupId`) (semconv). */
export const ATTR_MESSAGING_CONSUMER_GROUP_NAME = 'messaging.consumer.group.name';
/** `messaging.kafka.offset`: the Kafka offset of the message (semconv). */
export const ATTR_MESSAGING_KAFKA_OFFSET = 'messaging.kafka.offset';
/** `messaging.rabbitmq.message.delivery_tag`: the AMQP delivery tag (semconv). */
export const ATTR_MESSAGING_RABBITMQ_DELIVERY_TAG = 'messaging.rabbitmq.message.delivery_tag';

/** `idempotency.scope`: the scope of the message's record. */
export const ATTR_IDEMPOTENCY_SCOPE = 'idempotency.scope';
/** `idempotency.key`: the idempotency key; on spans only with `includeIdempotencyKey` (it may be personal data). */
export const ATTR_IDEMPOTENCY_KEY = 'idempotency.key';
/** `idempotency.outcome`: the claim outcome (`ACQUIRED`, `DUPLICATE`, …, `UNPROTECTED`). */
export const ATTR_IDEMPOTENCY_OUTCOME = 'idempotency.outcome';
/** `idempotency.attempt`: the record's attempt number. */
export const ATTR_IDEMPOTENCY_ATTEMPT = 'idempotency.attempt';
/** `idempotency.fencing_token`: the claim's fencing token. */
export const ATTR_IDEMPOTENCY_FENCING_TOKEN = 'idempotency.fencing_token';
/** `idempotency.broker_action`: the adapter's decision for the broker (`ack`, `retry`, `resolve`, `delete`, …). */
export const ATTR_IDEMPOTENCY_BROKER_ACTION = 'idempotency.broker_action';
/** `idempotency.store.operation`: which store round trip a duration is of: `claim` or `write`. */
export const ATTR_IDEMPOTENCY_STORE_OPERATION = 'idempotency.store.operation';
