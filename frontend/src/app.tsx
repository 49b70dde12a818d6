// Routes and the sign-in gate. The route table is `routes.json` (the
// server answers index.html for exactly these paths); every page loads on
// demand. The reader's chunk is asked for at once, beside the session
// check, and evaluates in a task of its own: the entry's evaluation and the
// reader's are two short tasks, not one long one.
import { useEffect } from 'preact/hooks';
import { LocationProvider, Route, Router, lazy, useLocation } from 'preact-iso';
import type { ComponentType } from 'preact';
import routes from './routes.json';
import { routeScope } from './routeScope';
import { me } from './state/session';
import { Login } from './login/Login';
import { Shell } from './ui/Shell';
import { Loading } from './ui/states';
import { Toasts } from './ui/toast';

const loadReader = () => import('./reader/Reader').then((module) => module.Reader);
void loadReader();
const Reader = lazy(loadReader);
const Live = lazy(() => import('./live/Live').then((module) => module.Live));
const Resources = lazy(() => import('./live/Resources').then((module) => module.Resources));
const Tasks = lazy(() => import('./live/Tasks').then((module) => module.Tasks));
const Settings = lazy(() => import('./settings/Settings').then((module) => module.Settings));
const Docs = lazy(() => import('./docs/Docs').then((module) => module.Docs));
const Gateway = lazy(() => import('./gateway/Gateway').then((module) => module.Gateway));

function Home() {
  const { route } = useLocation();
  useEffect(() => route('/read', true), []);
  return <Loading />;
}

function NotFound() {
  return (
    <div class="state">
      <h2>No such page</h2>
      <p>
        <a href="/read">Go to the reader</a>
      </p>
    </div>
  );
}

/** Links to anything but a client route (the server's own pages) are real page loads. */
const SCOPE = routeScope(routes.routes.map((entry) => entry.path));

const PAGES: Record<string, ComponentType<any>> = {
  home: Home,
  reader: Reader,
  live: Live,
  resources: Resources,
  tasks: Tasks,
  settings: Settings,
  docs: Docs,
  gateway: Gateway,
};

/** Signed-in pages: anonymous visitors go to the login page and come back. */
function Gate() {
  const { path, url, route } = useLocation();
  const user = me.value;
  useEffect(() => {
    if (user === null && path !== '/login') route(`/login?next=${encodeURIComponent(url)}`, true);
  }, [user, path]);
  if (path === '/login') return <Login />;
  if (user === undefined || user === null) return <Loading />;
  return (
    <Shell>
      <Router>
        {[
          ...routes.routes
            .filter((entry) => entry.page !== 'login')
            .map((entry) => <Route key={entry.path} path={entry.path} component={PAGES[entry.page] ?? NotFound} />),
          <Route key="404" default component={NotFound} />,
        ]}
      </Router>
    </Shell>
  );
}

export function App() {
  return (
    <LocationProvider scope={SCOPE}>
      <Gate />
      <Toasts />
    </LocationProvider>
  );
}
