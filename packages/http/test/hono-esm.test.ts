import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

// An ES module application loads Hono's ES module build, and this package (CommonJS) loads the same
// Hono: the middleware must read the app's context, built by the other build, through its own getters.
// Runs the built package (`dist`), as an application imports it.
const SCRIPT = `
import { Hono } from 'hono';
import { Idempotency, MemoryIdempotencyStore } from '@idempotent-consumer/core';
import { honoIdempotency } from '@idempotent-consumer/http/hono';
const idempotency = new Idempotency({ store: new MemoryIdempotencyStore(), logger: false });
const app = new Hono();
let runs = 0;
app.post('/orders/:id', honoIdempotency({ idempotency }), async (c) => c.json({ runs: ++runs }, 201));
const send = () => app.request('/orders/7', {
  method: 'POST',
  headers: { 'content-type': 'application/json', 'idempotency-key': '"esm-1"' },
  body: '{"a":1}',
});
const first = await send();
const again = await send();
console.log(JSON.stringify([first.status, await first.json(), again.status, again.headers.get('idempotent-replayed')]));
`;

describe('Hono middleware in an ES module application', () => {
  it('claims and replays (was a 500: hono/route read a symbol of the CommonJS build)', () => {
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', SCRIPT], {
      cwd: join(__dirname, '..'),
      encoding: 'utf8',
    });
    expect(JSON.parse(out)).toEqual([201, { runs: 1 }, 201, 'true']);
  });
});
