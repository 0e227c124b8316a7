/**
 * A browser-less visitor of the keys page: a cookie jar, GET /keys for the page and its CSRF token,
 * form POSTs that do not follow redirects. The jar is shared across base URLs (server instances).
 */
export interface Visitor {
  /** GET `<base>/keys`: the HTML and the CSRF token of its forms. */
  get(base: string): Promise<{ html: string; csrf: string }>;
  post(
    base: string,
    path: string,
    fields: Record<string, string>,
  ): Promise<{ status: number; html: string; location: string | null }>;
  cookie(name: string): string | undefined;
}

export function visitor(): Visitor {
  const jar = new Map<string, string>();
  const remember = (res: Response) => {
    for (const line of res.headers.getSetCookie()) {
      const [name, value] = (line.split(';')[0] as string).split('=') as [string, string];
      if (value === '') jar.delete(name);
      else jar.set(name, value);
    }
  };
  const cookie = () => [...jar].map(([n, v]) => `${n}=${v}`).join('; ');
  return {
    async get(base) {
      const res = await fetch(`${base}/keys`, { headers: { cookie: cookie() } });
      remember(res);
      const html = await res.text();
      return { html, csrf: /name="_csrf" value="([^"]+)"/.exec(html)?.[1] ?? '' };
    },
    async post(base, path, fields) {
      const res = await fetch(`${base}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: cookie() },
        body: new URLSearchParams(fields).toString(),
        redirect: 'manual',
      });
      remember(res);
      return { status: res.status, html: await res.text(), location: res.headers.get('location') };
    },
    cookie: (name) => jar.get(name),
  };
}
