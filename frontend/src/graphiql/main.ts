// GraphiQL, served by Trellis itself at `GET /graphql`: every script, style
// and font comes from our own `/assets/`, so the playground works offline
// and tells no third party who runs Trellis. Queries go over HTTP,
// subscriptions over `/graphql/ws`; both carry the session cookie.
import { createElement } from 'react';
import { createRoot } from 'react-dom/client';
import { GraphiQL } from 'graphiql';
import { createGraphiQLFetcher } from '@graphiql/toolkit';
import { createClient } from 'graphql-ws';
import 'graphiql/style.css';
import './graphiql.css';

const wsUrl = new URL('/graphql/ws', location.href);
wsUrl.protocol = wsUrl.protocol === 'https:' ? 'wss:' : 'ws:';

const fetcher = createGraphiQLFetcher({
  url: '/graphql',
  wsClient: createClient({ url: wsUrl.toString(), lazy: true }),
});

const defaultQuery = `# Welcome to the Trellis GraphQL playground.
#
# Sign in from the web client (or run the \`login\` mutation here): the
# session cookie then authenticates every query and subscription.

{
  me { username role }
}
`;

const root = document.getElementById('graphiql');
if (root) {
  createRoot(root).render(createElement(GraphiQL, { fetcher, defaultQuery }));
}
