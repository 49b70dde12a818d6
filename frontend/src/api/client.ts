// The one way the app talks to the server: typed documents (generated from
// schema.graphql) over HTTP for queries and mutations, and one shared
// `graphql-transport-ws` connection for subscriptions. The session cookie
// authenticates both (same origin).
import { Client, fetchExchange, subscriptionExchange, type CombinedError } from '@urql/core';
import { createClient as createWsClient, type Client as WsClient } from 'graphql-ws';
import { signal } from '@preact/signals';
import type { TypedDocumentString } from '../gql/graphql';

/** A GraphQL error with its `extensions.code` (`UNAUTHENTICATED`, `RATE_LIMITED`…). */
export class ApiError extends Error {
  readonly code: string;
  /** Seconds to wait (`RATE_LIMITED`). */
  readonly retryAfter?: number;
  /** The request never reached the server (offline, server down). */
  readonly network: boolean;

  constructor(message: string, code: string, options: { retryAfter?: number; network?: boolean } = {}) {
    super(message);
    this.name = 'ApiError';
    this.code = code;
    this.retryAfter = options.retryAfter;
    this.network = options.network ?? false;
  }
}

export function toApiError(error: CombinedError): ApiError {
  if (error.networkError) {
    return new ApiError('The server cannot be reached.', 'NETWORK', { network: true });
  }
  const first = error.graphQLErrors[0];
  const extensions = (first?.extensions ?? {}) as { code?: string; retryAfter?: number };
  // A 4xx/5xx answer without GraphQL errors in it.
  const status = (error.response as Response | undefined)?.status;
  return new ApiError(
    first?.message ?? error.message,
    extensions.code ?? (status === 401 ? 'UNAUTHENTICATED' : 'INTERNAL'),
    { retryAfter: extensions.retryAfter },
  );
}

/** The state of the subscription connection, for the connection indicator. */
export type Connection = 'idle' | 'connecting' | 'online' | 'offline';
export const connection = signal<Connection>('idle');

const reconnectListeners = new Set<() => void>();
/** Calls `listener` each time the subscription connection comes back after a loss. */
export function onReconnect(listener: () => void): () => void {
  reconnectListeners.add(listener);
  return () => reconnectListeners.delete(listener);
}

let ws: WsClient | null = null;
let wasOnline = false;

function wsUrl(): string {
  const url = new URL('/graphql/ws', location.href);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  return url.toString();
}

function wsClient(): WsClient {
  if (ws) return ws;
  ws = createWsClient({
    url: wsUrl(),
    lazy: true,
    lazyCloseTimeout: 3_000,
    keepAlive: 20_000,
    // Keep trying: a dashboard outlives server restarts.
    retryAttempts: Infinity,
    shouldRetry: () => true,
    retryWait: async (retries) => {
      const base = Math.min(1_000 * 2 ** retries, 15_000);
      await new Promise((resolve) => setTimeout(resolve, base / 2 + Math.random() * (base / 2)));
    },
    on: {
      connecting: () => {
        connection.value = 'connecting';
      },
      connected: () => {
        connection.value = 'online';
        if (wasOnline) reconnectListeners.forEach((listener) => listener());
        wasOnline = true;
      },
      closed: () => {
        connection.value = navigator.onLine ? 'connecting' : 'offline';
      },
    },
  });
  return ws;
}

/** Drops the subscription connection (its identity changed: login, logout). */
export function resetSubscriptions(): void {
  ws?.dispose();
  ws = null;
  wasOnline = false;
  connection.value = 'idle';
}

export const client = new Client({
  url: '/graphql',
  fetchOptions: { credentials: 'same-origin', headers: { 'content-type': 'application/json' } },
  // The app keeps its own state in signals; every request goes to the server.
  requestPolicy: 'network-only',
  preferGetMethod: false,
  exchanges: [
    fetchExchange,
    subscriptionExchange({
      forwardSubscription: (request) => ({
        subscribe: (sink) => ({
          unsubscribe: wsClient().subscribe({ ...request, query: request.query ?? '' }, sink),
        }),
      }),
    }),
  ],
});

type Vars<V> = V extends Record<string, never> ? V | undefined : V;

/** Runs a query; resolves with its data or rejects with an {@link ApiError}. */
export async function query<R, V>(doc: TypedDocumentString<R, V>, variables: Vars<V>): Promise<R> {
  const result = await client.query<R>(doc.toString(), (variables ?? {}) as object).toPromise();
  if (result.error) throw toApiError(result.error);
  return result.data as R;
}

/** Runs a mutation; resolves with its data or rejects with an {@link ApiError}. */
export async function mutate<R, V>(doc: TypedDocumentString<R, V>, variables: Vars<V>): Promise<R> {
  const result = await client.mutation<R>(doc.toString(), (variables ?? {}) as object).toPromise();
  if (result.error) throw toApiError(result.error);
  return result.data as R;
}

/**
 * Follows a subscription until the returned function is called. Errors
 * (`EVENTS_LAGGED` included) reach `onError`; the stream goes on.
 */
export function subscribe<R, V>(
  doc: TypedDocumentString<R, V>,
  variables: Vars<V>,
  onData: (data: R) => void,
  onError?: (error: ApiError) => void,
): () => void {
  const { unsubscribe } = client
    .subscription<R>(doc.toString(), (variables ?? {}) as object)
    .subscribe((result) => {
      if (result.error) onError?.(toApiError(result.error));
      if (result.data) onData(result.data as R);
    });
  return unsubscribe;
}
