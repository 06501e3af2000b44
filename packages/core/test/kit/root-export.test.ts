import * as root from '../../src';
import * as kit from '../../src/kit';

describe('kit: the sub-path export', () => {
  it('exports exactly the kit pieces', () => {
    expect(Object.keys(kit).sort()).toEqual(
      [
        'AdapterLog',
        // plumbing for adapter, store and tool authors, not in the root
        'DEAD_LETTER_FIELDS',
        'NO_CLAIM_OUTCOME',
        'SCRIPT_NUMBER_OF_KEYS',
        'DEFAULT_MAX_COMMANDS_PER_WRITE',
        'WriteCoalescer',
        'deadLetterOf',
        'deadLetterReasonOf',
        'unprotectedDeadLetter',
        'decodeResult',
        'encodeResult',
        'DEFAULT_STORE_PROBE_BACKOFF',
        'UnprotectedRuns',
        'checkStoreAnswers',
        'checkStoreAtStart',
        'describeStoreLocation',
        'watchRedisErrors',
        'LeaseKeeperSet',
        // the message pipeline (pipeline/)
        'MessagePipeline',
        'decide',
        'leaseLostDuring',
        'StoreGate',
        'TypedEventEmitter',
        'checkAtMost',
        'checkBackoffOptions',
        'checkFiniteNonNegative',
        'checkFunction',
        'checkNonEmptyString',
        'checkNonNegativeInteger',
        'checkOneOf',
        'checkPositiveInteger',
        'checkRunOverrides',
        'extendHandlerContext',
        'giveBackUnrun',
        'recordCompletionLate',
        'writtenClaimOf',
        'unreadableDuplicateOf',
        'redactUrl',
        'heartbeatIntervalFor',
        'pickRunOverrides',
        'callUnprotected',
        'runUnprotected',
        'sharedAbortController',
        'sleep',
        'unlessAborted',
        // a stop() bounded by stopTimeoutMs (kit/stop-timeout, kit/within)
        'DEFAULT_STOP_TIMEOUT_MS',
        'STOP_FINAL_STEP_MIN_MS',
        'checkStopTimeoutMs',
        'within',
        // telemetry (kit/telemetry)
        'ATTR_IDEMPOTENCY_ATTEMPT',
        'ATTR_IDEMPOTENCY_BROKER_ACTION',
        'ATTR_IDEMPOTENCY_FENCING_TOKEN',
        'ATTR_IDEMPOTENCY_KEY',
        'ATTR_IDEMPOTENCY_OUTCOME',
        'ATTR_IDEMPOTENCY_SCOPE',
        'ATTR_IDEMPOTENCY_STORE_OPERATION',
        'ATTR_MESSAGING_CONSUMER_GROUP_NAME',
        'ATTR_MESSAGING_DESTINATION_NAME',
        'ATTR_MESSAGING_DESTINATION_PARTITION_ID',
        'ATTR_MESSAGING_KAFKA_OFFSET',
        'ATTR_MESSAGING_MESSAGE_ID',
        'ATTR_MESSAGING_OPERATION_NAME',
        'ATTR_MESSAGING_OPERATION_TYPE',
        'ATTR_MESSAGING_RABBITMQ_DELIVERY_TAG',
        'ATTR_MESSAGING_SYSTEM',
        'INSTRUMENTATION_SCOPE',
        'METRIC_BROKER_ACTIONS',
        'METRIC_HANDLER_DURATION',
        'METRIC_IN_FLIGHT',
        'METRIC_OUTCOMES',
        'METRIC_STORE_DURATION',
        'MessageTelemetry',
        'NOOP_MESSAGE_SPAN',
        'checkTelemetryOption',
        'headerCarrierGetter',
        'textOf',
      ].sort(),
    );
  });

  it('the root export (what users import) holds none of them', () => {
    const rootNames = new Set(Object.keys(root));
    expect(Object.keys(kit).filter((name) => rootNames.has(name))).toEqual([]);
  });

  it('the root export has no plumbing: script key counts, the result codec, the dead-letter vocabulary', () => {
    const rootNames = Object.keys(root);
    for (const name of [
      'SCRIPT_NUMBER_OF_KEYS',
      'encodeResult',
      'decodeResult',
      'DEAD_LETTER_FIELDS',
      'NO_CLAIM_OUTCOME',
      'deadLetterReasonOf',
    ]) {
      expect(rootNames).not.toContain(name);
    }
  });

  it('resolves by its package name, as adapters import it', async () => {
    const byName = await import('@idempotent-consumer/core/kit');
    expect(Object.keys(byName).sort()).toEqual(Object.keys(kit).sort());
  });
});
