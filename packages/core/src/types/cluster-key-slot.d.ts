/** The Redis Cluster hash slot (0-16383) of a key, honouring `{hash tags}`; ioredis' own implementation. */
declare module 'cluster-key-slot' {
  function calculateSlot(key: string | Buffer): number;
  export = calculateSlot;
}
