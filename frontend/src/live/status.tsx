// A status shown three ways: colour, icon and label (never colour alone).
import { signal } from '@preact/signals';
import { IconAlert, IconError, IconInfo, IconOk } from '../ui/icons';

export interface Level {
  value: number;
  label: string;
}

/** The server's scale (`nodeConfig.statusScale`), loaded with the tree. */
export const statusScale = signal<Level[]>([
  { value: 0, label: 'healthy' },
  { value: 1, label: 'degraded' },
  { value: 2, label: 'failing' },
  { value: 3, label: 'down' },
]);

export function statusLabel(value: number): string {
  const scale = statusScale.value;
  return scale.find((level) => level.value === value)?.label ?? `status ${value}`;
}

/** 0–3: the colour and icon band of a value, by its rank in the scale. */
export function band(value: number): number {
  const scale = statusScale.value;
  const rank = scale.findIndex((level) => level.value === value);
  if (rank < 0) return value <= 0 ? 0 : 3;
  if (scale.length <= 4) return Math.min(3, rank);
  return Math.min(3, Math.round((rank / (scale.length - 1)) * 3));
}

const ICONS = [IconOk, IconInfo, IconAlert, IconError];

export function Status({ value, own = false, prefix }: { value: number; own?: boolean; prefix?: string }) {
  const level = band(value);
  const Icon = ICONS[level];
  return (
    <span class={`status${own ? ' own' : ''}`} data-level={level}>
      <Icon size={12} />
      {prefix && <span class="sr-only">{prefix} </span>}
      {statusLabel(value)}
    </span>
  );
}
