import { describe, expect, test } from 'vitest';
import { afterLogin, localPath, oidcStartHref } from './returnTo';

describe('localPath', () => {
  test('keeps paths on this site', () => {
    expect(localPath('/gateway')).toBe('/gateway');
    expect(localPath('/read/feed/42?item=7')).toBe('/read/feed/42?item=7');
    expect(localPath('/')).toBe('/');
  });

  test('refuses what could leave the site or that the server would refuse', () => {
    for (const bad of ['https://evil.example/', '//evil.example/', '/\\evil.example', '/ok\\..', 'feeds', '', '/a\nb', 'javascript:alert(1)', `/${'a'.repeat(600)}`]) {
      expect(localPath(bad), bad).toBeNull();
    }
    expect(localPath(undefined)).toBeNull();
    expect(localPath(null)).toBeNull();
  });
});

describe('afterLogin', () => {
  test('goes back where the visitor came from, else to the reader', () => {
    expect(afterLogin('/settings')).toBe('/settings');
    expect(afterLogin('//evil.example')).toBe('/read');
    expect(afterLogin(undefined)).toBe('/read');
  });
});

describe('oidcStartHref', () => {
  test('adds return_to with the page the visitor was sent from', () => {
    expect(oidcStartHref('/auth/oidc/start', '/gateway')).toBe('/auth/oidc/start?return_to=%2Fgateway');
    expect(oidcStartHref('/auth/oidc/start', '/read/feed/4?item=7')).toBe('/auth/oidc/start?return_to=%2Fread%2Ffeed%2F4%3Fitem%3D7');
  });

  test('keeps a query the start URL already has', () => {
    expect(oidcStartHref('https://trellis.example/auth/oidc/start?x=1', '/live')).toBe('https://trellis.example/auth/oidc/start?x=1&return_to=%2Flive');
    expect(oidcStartHref('/auth/oidc/start?', '/live')).toBe('/auth/oidc/start?return_to=%2Flive');
  });

  test('leaves the start URL alone without a local page to return to', () => {
    expect(oidcStartHref('/auth/oidc/start', undefined)).toBe('/auth/oidc/start');
    expect(oidcStartHref('/auth/oidc/start', 'https://evil.example/')).toBe('/auth/oidc/start');
    expect(oidcStartHref('/auth/oidc/start', '/login')).toBe('/auth/oidc/start');
  });
});
