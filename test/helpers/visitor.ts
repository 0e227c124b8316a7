/**
 * A browser-less visitor of the keys page: a cookie jar, GET /keys for the page and its CSRF token,
 * form POSTs that do not follow redirects. The jar is shared across base URLs (server instances).
 * Each answer also carries its status, headers and raw `Set-Cookie` lines, for tests of exactly what
 * the server asks a browser to keep. A visitor may come from its own loopback address (`from`), so
 * tests can be several clients of one server.
 */
import { Agent, fetch as undiciFetch } from 'undici';

export interface Answer {
  status: number;
  html: string;
  headers: Headers;
  setCookies: string[];
}

export interface Visitor {
  /** GET `<base>/keys` (or `<base><path>`): the HTML and the CSRF token of its forms. */
  get(base: string, path?: string): Promise<Answer & { csrf: string }>;
  post(
    base: string,
    path: string,
    fields: Record<string, string>,
  ): Promise<Answer & { location: string | null }>;
  cookie(name: string): string | undefined;
  /** Puts a cookie into the jar (or, with undefined, takes it out), as another site or a test would. */
  setCookie(name: string, value: string | undefined): void;
  /** Closes the connections of a visitor made with `from` (nothing to do otherwise). */
  close(): Promise<void>;
}

/**
 * `headers` go with every request (e.g. `X-Forwarded-For`, to be another client behind a proxy);
 * `from`: the loopback address its connections come from (e.g. `127.0.0.7`), another client address.
 */
export function visitor(headers: Record<string, string> = {}, options: { from?: string } = {}): Visitor {
  const agent = options.from === undefined ? undefined : new Agent({ localAddress: options.from });
  const send = (url: string, init: RequestInit): Promise<Response> =>
    agent === undefined
      ? fetch(url, init)
      : (undiciFetch(url, {
          ...(init as Parameters<typeof undiciFetch>[1]),
          dispatcher: agent,
        }) as unknown as Promise<Response>);
  const jar = new Map<string, string>();
  const remember = (res: Response): string[] => {
    const lines = res.headers.getSetCookie();
    for (const line of lines) {
      const [name, value] = (line.split(';')[0] as string).split('=') as [string, string];
      if (value === '') jar.delete(name);
      else jar.set(name, value);
    }
    return lines;
  };
  const cookie = () => [...jar].map(([n, v]) => `${n}=${v}`).join('; ');
  return {
    async get(base, path = '/keys') {
      const res = await send(`${base}${path}`, { headers: { ...headers, cookie: cookie() } });
      const setCookies = remember(res);
      const html = await res.text();
      const csrf = /name="_csrf" value="([^"]+)"/.exec(html)?.[1] ?? '';
      return { status: res.status, html, headers: res.headers, setCookies, csrf };
    },
    async post(base, path, fields) {
      const res = await send(`${base}${path}`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/x-www-form-urlencoded', cookie: cookie() },
        body: new URLSearchParams(fields).toString(),
        redirect: 'manual',
      });
      const setCookies = remember(res);
      return {
        status: res.status,
        html: await res.text(),
        headers: res.headers,
        setCookies,
        location: res.headers.get('location'),
      };
    },
    cookie: (name) => jar.get(name),
    setCookie: (name, value) => {
      if (value === undefined) jar.delete(name);
      else jar.set(name, value);
    },
    close: async () => agent?.close(),
  };
}
