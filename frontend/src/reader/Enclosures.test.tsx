import { cleanup, fireEvent, render, screen } from '@testing-library/preact';
import { afterEach, describe, expect, test } from 'vitest';
import { Enclosures, fileName, humanSize, kindOf, webUrl } from './Enclosures';
import { FeedIcon, ownIcon } from './FeedIcon';

afterEach(cleanup);

describe('enclosure helpers', () => {
  test('only http(s) URLs pass', () => {
    expect(webUrl('https://cdn.example/ep1.mp3')).toBe('https://cdn.example/ep1.mp3');
    expect(webUrl('http://cdn.example/a.pdf')).toBe('http://cdn.example/a.pdf');
    expect(webUrl('javascript:alert(1)')).toBeNull();
    expect(webUrl('data:audio/mpeg;base64,AAAA')).toBeNull();
    expect(webUrl('/relative.mp3')).toBeNull();
  });

  test('sizes read as decimal bytes; empty or junk is unknown', () => {
    expect(humanSize('512')).toBe('512 B');
    expect(humanSize('1500')).toBe('1.5 KB');
    expect(humanSize('48123456')).toBe('48 MB');
    expect(humanSize('12345678901234567890')).toBe('12345679 TB');
    expect(humanSize('')).toBeNull();
    expect(humanSize(null)).toBeNull();
    expect(humanSize('0')).toBeNull();
    expect(humanSize('12abc')).toBeNull();
  });

  test('kinds and file names', () => {
    expect(kindOf('audio/mpeg')).toBe('audio');
    expect(kindOf('VIDEO/mp4')).toBe('video');
    expect(kindOf('image/png')).toBe('image');
    expect(kindOf('application/pdf')).toBe('file');
    expect(kindOf(null)).toBe('file');
    expect(fileName('https://cdn.example/shows/episode%201.mp3?x=1')).toBe('episode 1.mp3');
    expect(fileName('https://cdn.example/')).toBe('cdn.example');
  });
});

describe('<Enclosures>', () => {
  test('audio: a player that loads nothing until played, and a download link', () => {
    const { container } = render(
      <Enclosures enclosures={[{ url: 'https://cdn.example/ep1.mp3', mimeType: 'audio/mpeg', length: '1500000' }]} />,
    );
    const audio = container.querySelector('audio');
    expect(audio?.getAttribute('src')).toBe('https://cdn.example/ep1.mp3');
    expect(audio?.getAttribute('preload')).toBe('none');
    expect(audio?.hasAttribute('controls')).toBe(true);
    const link = screen.getByRole('link', { name: /Download ep1\.mp3/ });
    expect(link.getAttribute('href')).toBe('https://cdn.example/ep1.mp3');
    expect(link.textContent).toContain('1.5 MB');
  });

  test('video: a player with preload none', () => {
    const { container } = render(
      <Enclosures enclosures={[{ url: 'https://cdn.example/clip.mp4', mimeType: 'video/mp4', length: null }]} />,
    );
    const video = container.querySelector('video');
    expect(video?.getAttribute('src')).toBe('https://cdn.example/clip.mp4');
    expect(video?.getAttribute('preload')).toBe('none');
    expect(container.querySelector('audio')).toBeNull();
  });

  test('image: shown only once asked for', () => {
    const { container } = render(
      <Enclosures enclosures={[{ url: 'https://cdn.example/cover.jpg', mimeType: 'image/jpeg', length: '' }]} />,
    );
    expect(container.querySelector('img')).toBeNull();
    fireEvent.click(screen.getByRole('button', { name: /Show image cover\.jpg/ }));
    expect(container.querySelector('img')?.getAttribute('src')).toBe('https://cdn.example/cover.jpg');
  });

  test('anything else: a download link with the name and size, or the name alone', () => {
    render(
      <Enclosures
        enclosures={[
          { url: 'https://cdn.example/notes.pdf', mimeType: 'application/pdf', length: '2048' },
          { url: 'https://cdn.example/raw.bin', mimeType: null, length: '' },
        ]}
      />,
    );
    expect(screen.getByRole('link', { name: /Download notes\.pdf/ }).textContent).toBe('Download notes.pdf (2.0 KB)');
    expect(screen.getByRole('link', { name: /Download raw\.bin/ }).textContent).toBe('Download raw.bin');
  });

  test('a javascript: or data: URL is not rendered at all', () => {
    const { container } = render(
      <Enclosures
        enclosures={[
          { url: 'javascript:alert(1)', mimeType: 'audio/mpeg', length: null },
          { url: 'data:text/html,<b>x</b>', mimeType: 'text/html', length: null },
        ]}
      />,
    );
    expect(container.innerHTML).toBe('');
  });
});

describe('<FeedIcon>', () => {
  test('a placeholder letter while the feed has no icon', () => {
    const { container } = render(<FeedIcon feed={{ id: '1', name: 'example news', iconUrl: null }} />);
    expect(container.querySelector('img')).toBeNull();
    const placeholder = container.querySelector('.feed-icon.letter');
    expect(placeholder?.textContent).toBe('E');
    expect(placeholder?.getAttribute('aria-hidden')).toBe('true');
  });

  test('our own icon as a decorative fixed-size image', () => {
    const { container } = render(<FeedIcon feed={{ id: '7', name: 'Blog', iconUrl: '/icons/7' }} />);
    const img = container.querySelector('img');
    expect(img?.getAttribute('src')).toBe(new URL('/icons/7', location.href).href);
    expect(img?.getAttribute('alt')).toBe('');
    expect(img?.getAttribute('width')).toBe('16');
    expect(img?.getAttribute('height')).toBe('16');
    expect(img?.getAttribute('loading')).toBe('lazy');
  });

  test('a broken icon falls back to the placeholder; a foreign one is never requested', () => {
    const { container } = render(<FeedIcon feed={{ id: '7', name: 'Blog', iconUrl: '/icons/7' }} />);
    fireEvent.error(container.querySelector('img')!);
    expect(container.querySelector('img')).toBeNull();
    expect(container.querySelector('.feed-icon.letter')?.textContent).toBe('B');
    expect(ownIcon('https://tracker.example/icon.png')).toBeNull();
    expect(ownIcon('javascript:alert(1)')).toBeNull();
  });
});
