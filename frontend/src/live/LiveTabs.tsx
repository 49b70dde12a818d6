// The dashboard's three views.
export function LiveTabs({ current }: { current: 'tree' | 'resources' | 'tasks' }) {
  const tabs = [
    ['tree', '/live', 'Tree'],
    ['resources', '/live/resources', 'Resources'],
    ['tasks', '/live/tasks', 'Tasks'],
  ] as const;
  return (
    <nav class="tabs" aria-label="Dashboard views">
      {tabs.map(([key, href, label]) => (
        <a key={key} href={href} aria-current={current === key ? 'page' : undefined}>
          {label}
        </a>
      ))}
    </nav>
  );
}
