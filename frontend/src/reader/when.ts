// "5 min. ago", "3 hr. ago", "Nov 2": an item's date as the list shows it.
const relative = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto', style: 'short' });
const dateFormat = new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric' });

export function when(iso: string, now = Date.now()): string {
  const then = Date.parse(iso);
  const minutes = Math.round((then - now) / 60_000);
  if (Math.abs(minutes) < 60) return relative.format(minutes, 'minute');
  const hours = Math.round(minutes / 60);
  if (Math.abs(hours) < 24) return relative.format(hours, 'hour');
  const days = Math.round(hours / 24);
  if (Math.abs(days) < 7) return relative.format(days, 'day');
  return dateFormat.format(then);
}
