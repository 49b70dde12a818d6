import { describe, expect, test } from 'vitest';
import routes from './routes.json';
import { routeScope } from './routeScope';

const scope = routeScope(routes.routes.map((route) => route.path));

describe('the router’s scope', () => {
  test('takes every client route, with a query or a fragment', () => {
    for (const route of routes.routes) expect(scope.test(route.example), route.example).toBe(true);
    for (const href of ['/read?show=all', '/read/feed/42?item=7', '/login?next=%2Fgateway', '/docs/a/b/c.md#top', '/docs', '/settings/reading', '/live/node/12']) {
      expect(scope.test(href), href).toBe(true);
    }
  });

  test('leaves the server’s own pages and other origins to the browser', () => {
    for (const href of [
      '/auth/oidc/start',
      '/auth/oidc/start?return_to=%2Fgateway',
      '/gateway/oauth/anilist/callback?code=x',
      '/graphql',
      '/metrics',
      '/assets/app.js',
      '/readers',
      '/live/node/12/extra',
      'http://127.0.0.1:8080/auth/oidc/start',
      'https://example.org/read',
    ]) {
      expect(scope.test(href), href).toBe(false);
    }
  });
});
