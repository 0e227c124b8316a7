/**
 * A real SMTP server in this process on loopback, recording every connection and every mail: the
 * envelope's recipients (who the mail really goes to), the `To` header, and the six-digit code of a
 * sign-in mail.
 */
import type { AddressInfo } from 'node:net';
import { simpleParser } from 'mailparser';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll } from 'vitest';

export interface SmtpDelivery {
  rcpt: string[];
  to: string;
  code: string;
}

export interface TestSmtp {
  /** `smtp://127.0.0.1:<port>` */
  url: string;
  deliveries: SmtpDelivery[];
  /** Connections opened so far (a refused address must not even open one). */
  connections(): number;
  /** The `index`-th delivery (0-based), waited for up to 10 s. */
  delivery(index: number): Promise<SmtpDelivery>;
  close(): Promise<void>;
}

export async function startSmtp(): Promise<TestSmtp> {
  const deliveries: SmtpDelivery[] = [];
  let connections = 0;
  const smtp = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onConnect(_session, callback) {
      connections++;
      callback();
    },
    onData(stream, session, callback) {
      simpleParser(stream)
        .then((mail) => {
          deliveries.push({
            rcpt: session.envelope.rcptTo.map((r) => r.address),
            to: mail.to && !Array.isArray(mail.to) ? mail.to.text : '',
            code: /\b(\d{6})\b/.exec(mail.text ?? '')?.[1] ?? '',
          });
          callback();
        })
        .catch(callback);
    },
  });
  await new Promise<void>((resolve) => smtp.listen(0, '127.0.0.1', resolve));
  return {
    url: `smtp://127.0.0.1:${(smtp.server.address() as AddressInfo).port}`,
    deliveries,
    connections: () => connections,
    async delivery(index) {
      for (let i = 0; i < 400 && deliveries.length <= index; i++) await new Promise((r) => setTimeout(r, 25));
      const delivery = deliveries[index];
      if (!delivery) throw new Error(`no mail #${index + 1} arrived`);
      return delivery;
    },
    close: () => new Promise<void>((resolve) => smtp.close(() => resolve())),
  };
}

/** Registers the suite's SMTP server (started before, closed after); read it inside tests and hooks. */
export function useSmtp(): Omit<TestSmtp, 'close'> {
  let started: TestSmtp | undefined;
  beforeAll(async () => {
    started = await startSmtp();
  });
  afterAll(() => started?.close());
  const running = (): TestSmtp => {
    if (started === undefined) throw new Error('the SMTP server is not running (outside the suite?)');
    return started;
  };
  return {
    get url() {
      return running().url;
    },
    get deliveries() {
      return running().deliveries;
    },
    connections: () => running().connections(),
    delivery: (index) => running().delivery(index),
  };
}
