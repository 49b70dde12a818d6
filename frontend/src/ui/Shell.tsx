// The frame around every signed-in page: the navigation rail (a bottom bar
// on phones), the connection indicator and the page.
import type { ComponentChildren } from 'preact';
import { useLocation } from 'preact-iso';
import { connection } from '../api/client';
import { logout, me } from '../state/session';
import { IconCode, IconDocs, IconGateway, IconLogout, IconRss, IconSettings, IconTree } from './icons';

const CONNECTION_LABEL = {
  idle: 'Live updates not started',
  connecting: 'Reconnecting to live updates…',
  online: 'Live updates connected',
  offline: 'Offline: changes are kept and sent when you are back',
} as const;

export function Shell({ children }: { children: ComponentChildren }) {
  const { path, route } = useLocation();
  const section = path.split('/')[1] ?? '';
  const nav = [
    { href: '/read', key: 'read', label: 'Reader', Icon: IconRss },
    { href: '/live', key: 'live', label: 'Live dashboard', Icon: IconTree },
    { href: '/docs', key: 'docs', label: 'Docs', Icon: IconDocs },
    { href: '/gateway', key: 'gateway', label: 'Gateway', Icon: IconGateway },
    { href: '/settings', key: 'settings', label: 'Settings', Icon: IconSettings },
  ];
  const state = connection.value;
  return (
    <div class="shell">
      <a class="skip-link" href="#main">
        Skip to content
      </a>
      <nav class="rail" aria-label="Sections">
        <span class="logo" aria-hidden="true">
          T
        </span>
        {nav.map(({ href, key, label, Icon }) => (
          <a key={key} href={href} title={label} aria-label={label} aria-current={section === key ? 'page' : undefined}>
            <Icon />
          </a>
        ))}
        <span class="spacer" />
        <a href="/graphql" title="GraphQL playground" aria-label="GraphQL playground" target="_blank" rel="noopener">
          <IconCode />
        </a>
        <span class="conn" data-state={state} role="img" aria-label={CONNECTION_LABEL[state]} title={CONNECTION_LABEL[state]} />
        <button
          type="button"
          title={`Sign out ${me.value?.username ?? ''}`}
          aria-label={`Sign out ${me.value?.username ?? ''}`}
          onClick={async () => {
            await logout();
            route('/login');
          }}
        >
          <IconLogout />
        </button>
      </nav>
      <main class="main" id="main">
        {children}
      </main>
    </div>
  );
}
