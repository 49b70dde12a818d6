// Inline SVG icons (stroke, 16–20 px): no icon font, no request.
import type { JSX } from 'preact';

type IconProps = { size?: number; label?: string } & JSX.SVGAttributes<SVGSVGElement>;

function icon(paths: string) {
  return function Icon({ size = 18, label, ...rest }: IconProps) {
    return (
      <svg
        width={size}
        height={size}
        viewBox="0 0 24 24"
        fill="none"
        stroke="currentColor"
        stroke-width="2"
        stroke-linecap="round"
        stroke-linejoin="round"
        role={label ? 'img' : undefined}
        aria-label={label}
        aria-hidden={label ? undefined : 'true'}
        focusable="false"
        {...rest}
        dangerouslySetInnerHTML={{ __html: paths }}
      />
    );
  };
}

export const IconRss = icon('<path d="M4 11a9 9 0 0 1 9 9"/><path d="M4 4a16 16 0 0 1 16 16"/><circle cx="5" cy="19" r="1"/>');
export const IconTree = icon('<rect x="3" y="3" width="6" height="6" rx="1"/><rect x="15" y="15" width="6" height="6" rx="1"/><rect x="15" y="3" width="6" height="6" rx="1"/><path d="M6 9v3a3 3 0 0 0 3 3h6M9 6h6"/>');
export const IconDocs = icon('<path d="M14 3H6a2 2 0 0 0-2 2v14a2 2 0 0 0 2 2h12a2 2 0 0 0 2-2V9z"/><path d="M14 3v6h6M8 13h8M8 17h5"/>');
export const IconGateway = icon('<path d="M8 3 4 7l4 4"/><path d="M4 7h16"/><path d="m16 21 4-4-4-4"/><path d="M20 17H4"/>');
export const IconSettings = icon('<circle cx="12" cy="12" r="3"/><path d="M19.4 15a1.7 1.7 0 0 0 .3 1.8l.1.1a2 2 0 1 1-2.8 2.8l-.1-.1a1.7 1.7 0 0 0-1.8-.3 1.7 1.7 0 0 0-1 1.5V21a2 2 0 1 1-4 0v-.1a1.7 1.7 0 0 0-1.1-1.5 1.7 1.7 0 0 0-1.8.3l-.1.1a2 2 0 1 1-2.8-2.8l.1-.1a1.7 1.7 0 0 0 .3-1.8 1.7 1.7 0 0 0-1.5-1H3a2 2 0 1 1 0-4h.1a1.7 1.7 0 0 0 1.5-1.1 1.7 1.7 0 0 0-.3-1.8l-.1-.1a2 2 0 1 1 2.8-2.8l.1.1a1.7 1.7 0 0 0 1.8.3H9a1.7 1.7 0 0 0 1-1.5V3a2 2 0 1 1 4 0v.1a1.7 1.7 0 0 0 1 1.5 1.7 1.7 0 0 0 1.8-.3l.1-.1a2 2 0 1 1 2.8 2.8l-.1.1a1.7 1.7 0 0 0-.3 1.8V9a1.7 1.7 0 0 0 1.5 1H21a2 2 0 1 1 0 4h-.1a1.7 1.7 0 0 0-1.5 1z"/>');
export const IconCode = icon('<path d="m16 18 6-6-6-6M8 6l-6 6 6 6"/>');
export const IconLogout = icon('<path d="M9 21H5a2 2 0 0 1-2-2V5a2 2 0 0 1 2-2h4M16 17l5-5-5-5M21 12H9"/>');
export const IconStar = icon('<path d="m12 2 3.1 6.3 6.9 1-5 4.9 1.2 6.8-6.2-3.2-6.2 3.2L7 14.2 2 9.3l6.9-1z"/>');
export const IconStarFilled = icon('<path fill="currentColor" d="m12 2 3.1 6.3 6.9 1-5 4.9 1.2 6.8-6.2-3.2-6.2 3.2L7 14.2 2 9.3l6.9-1z"/>');
export const IconBookmark = icon('<path d="M19 21l-7-5-7 5V5a2 2 0 0 1 2-2h10a2 2 0 0 1 2 2z"/>');
export const IconExternal = icon('<path d="M18 13v6a2 2 0 0 1-2 2H5a2 2 0 0 1-2-2V8a2 2 0 0 1 2-2h6M15 3h6v6M10 14 21 3"/>');
export const IconCheck = icon('<path d="M20 6 9 17l-5-5"/>');
export const IconCheckAll = icon('<path d="M18 6 7 17l-5-5M22 10l-7.5 7.5L13 16"/>');
export const IconSearch = icon('<circle cx="11" cy="11" r="7"/><path d="m21 21-4.3-4.3"/>');
export const IconPlus = icon('<path d="M12 5v14M5 12h14"/>');
export const IconBack = icon('<path d="M15 18l-6-6 6-6"/>');
export const IconChevron = icon('<path d="m9 18 6-6-6-6"/>');
export const IconChevronDown = icon('<path d="m6 9 6 6 6-6"/>');
export const IconRefresh = icon('<path d="M21 12a9 9 0 0 1-15.5 6.2L3 16M3 12a9 9 0 0 1 15.5-6.2L21 8M21 3v5h-5M3 21v-5h5"/>');
export const IconMenu = icon('<path d="M3 6h18M3 12h18M3 18h18"/>');
export const IconClose = icon('<path d="M18 6 6 18M6 6l12 12"/>');
export const IconEdit = icon('<path d="M12 20h9M16.5 3.5a2.1 2.1 0 0 1 3 3L7 19l-4 1 1-4z"/>');
export const IconTasks = icon('<path d="M9 6h11M9 12h11M9 18h11M4 6h.01M4 12h.01M4 18h.01"/>');
export const IconKeyboard = icon('<rect x="2" y="6" width="20" height="12" rx="2"/><path d="M6 10h.01M10 10h.01M14 10h.01M18 10h.01M7 14h10"/>');
export const IconAlert = icon('<path d="M10.3 3.9 1.8 18a2 2 0 0 0 1.7 3h17a2 2 0 0 0 1.7-3L13.7 3.9a2 2 0 0 0-3.4 0zM12 9v4M12 17h.01"/>');
export const IconInfo = icon('<circle cx="12" cy="12" r="10"/><path d="M12 16v-4M12 8h.01"/>');
export const IconOk = icon('<circle cx="12" cy="12" r="10"/><path d="m8 12 3 3 5-6"/>');
export const IconError = icon('<circle cx="12" cy="12" r="10"/><path d="m15 9-6 6M9 9l6 6"/>');
