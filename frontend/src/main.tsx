import { render } from 'preact';
import { App } from './app';
import { loadSession } from './state/session';
import { applyPrefs } from './state/prefs';
import './styles/app.css';

applyPrefs();
void loadSession();
render(<App />, document.getElementById('app')!);

if ('serviceWorker' in navigator && import.meta.env.PROD) {
  void navigator.serviceWorker.register('/sw.js', { scope: '/' }).catch(() => {
    // No offline support in this browser session; the app works online.
  });
}
