import type { IdempotencyLogger } from '@idempotent-consumer/core';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { headersBefore } from './answer';
import { clientGoneSignal } from './client-gone';
import { sendAnswer } from './fastify-answer';
import { finishOnHijack, sendOnce } from './fastify-reply-guards';
import type { FastifyPluginState, InFlight } from './fastify-state';

/**
 * Claims a covered request right before its handler (see the plugin's description): answers it (a replay
 * or a problem), or marks it in flight so that onSend stores its answer. `early`: the route was registered
 * before the plugin, so this runs before the route's own `preHandler` hooks; the first claim of such a
 * route says so once through `logger`, and `early` remembers it.
 */
export async function claimFastifyRequest(
  plugin: FastifyPluginState,
  request: FastifyRequest,
  reply: FastifyReply,
  early?: { readonly logger: IdempotencyLogger | false; readonly warned: Set<string> },
): Promise<unknown> {
  const config = request.routeOptions.config?.idempotency;
  const route = request.routeOptions.url;
  if (config === false || route === undefined) return;
  const gone = clientGoneSignal(reply.raw);
  const admission = await plugin.http.admit({
    request,
    signal: gone,
    method: request.method,
    route,
    target: request.url,
    headers: request.headers,
    body: request.body,
    routeConfig: config,
  });
  if (admission.kind === 'pass') return;
  if (early?.logger && !early.warned.has(`${request.method} ${route}`)) {
    early.warned.add(`${request.method} ${route}`);
    early.logger.warn(
      `idempotent-consumer: ${request.method} ${route} was registered before the idempotency plugin, so its key is claimed before the route's own preHandler hooks (an authentication hook's 401 would be stored and replayed). Register the plugin with await before the routes.`,
      { route },
    );
  }
  if (admission.kind === 'answer') {
    if (admission.answer.headers['content-type'] === undefined)
      plugin.untyped.set(request, admission.answer.body);
    return sendAnswer(reply, admission.answer);
  }
  const state: InFlight = {
    claimed: admission.claimed,
    headersBefore: headersBefore(reply.getHeaders()),
    gone,
  };
  plugin.inFlight.set(request, state);
  request.idempotency = admission.claimed.context;
  finishOnHijack(plugin, request, reply, state);
  sendOnce(plugin, request, reply, state);
}
