/**
 * The sign-in code's mail (DESIGN §5 "Keys page", §7): SMTP through nodemailer when
 * `VIDSHEET_SMTP_URL` is set, otherwise the code is written to the server log so a developer can sign
 * in on a machine with no mail server (with a warning at start: that is never right in production).
 */
import nodemailer from 'nodemailer';
import { normalizeMailbox } from '#vidsheet/core/mailbox.js';
import { excerpt } from '#vidsheet/core/redact.js';
import type { ServerConfig } from '../config.js';

/** DESIGN §7: the page's tests and people look for this exact subject. */
export const SIGN_IN_SUBJECT = 'Your vidsheet sign-in code';

/** The log message carrying a code when no SMTP is configured (a development setup reads it there). */
export const LOG_CODE_MESSAGE = 'sign-in code (development only: no SMTP configured)';

/** What both mailers need from a logger; pino (Fastify's `app.log`) fits it. */
export interface MailLog {
  info(o: object, m: string): void;
  warn(o: object, m: string): void;
}

/** Sends one sign-in code; `kind` lets the server say at start which one it runs with. */
export interface Mailer {
  /**
   * Resolves when the mail was handed to the SMTP server (or logged); rejects when delivery failed, or
   * at once when `to` is not one normalised mailbox (nothing is sent then).
   */
  sendSignInCode(to: string, code: string): Promise<void>;
  readonly kind: 'smtp' | 'log';
}

/** Generous but finite, so a dead mail server cannot keep deliveries (and their sockets) open for minutes. */
const SMTP_TIMEOUTS = { connectionTimeout: 10_000, greetingTimeout: 10_000, socketTimeout: 30_000 };

/**
 * SMTP through nodemailer when `config.smtpUrl` is set (From: `config.mailFrom`), else codes go to
 * `log` (one `log.warn` here, at creation: development only). The keys page URL goes into the mail so a
 * reader who closed the tab can find the page again.
 */
export function createMailer(
  config: Pick<ServerConfig, 'smtpUrl' | 'mailFrom' | 'baseUrl'>,
  log: MailLog,
): Mailer {
  const keysUrl = `${config.baseUrl.replace(/\/+$/, '')}/keys`;
  if (config.smtpUrl === undefined) {
    log.warn(
      { keysUrl },
      'no SMTP configured (VIDSHEET_SMTP_URL): sign-in codes are written to this log — development only',
    );
    return {
      kind: 'log',
      async sendSignInCode(to, code) {
        checkMail(to, code);
        log.info({ email: excerpt(to), code }, LOG_CODE_MESSAGE);
      },
    };
  }
  const from = config.mailFrom;
  if (from === undefined) throw new Error('VIDSHEET_MAIL_FROM must be set together with VIDSHEET_SMTP_URL');
  // The URL carries host, port, credentials and `smtps:` (implicit TLS); the other keys (our timeouts)
  // apply where the URL does not set them.
  const transport = nodemailer.createTransport({ url: config.smtpUrl, ...SMTP_TIMEOUTS });
  return {
    kind: 'smtp',
    async sendSignInCode(to, code) {
      checkMail(to, code);
      await transport.sendMail({ from, to, subject: SIGN_IN_SUBJECT, text: mailText(code, keysUrl) });
    },
  };
}

/** Plain text only: the code as six digits where a person (or a test) finds it at once. */
function mailText(code: string, keysUrl: string): string {
  return [
    `Your vidsheet sign-in code is ${code}.`,
    '',
    `It is valid for 10 minutes. Enter it on ${keysUrl}`,
    '',
    'If you did not ask for it, ignore this mail.',
    '',
  ].join('\n');
}

/**
 * A mailer never sends anything but a code, to anything but one normalised mailbox (DESIGN §5a), so a
 * caller's mistake can neither put other text into a mail nor hand nodemailer a list of recipients
 * (it would deliver to every address it can parse out of `a@x.com,b@y.com` or `x<b@y.com>`).
 */
function checkMail(to: string, code: string): void {
  if (normalizeMailbox(to) !== to) throw new Error('a sign-in code goes to one normalised mailbox');
  if (!/^\d{6}$/.test(code)) throw new Error('a sign-in code is six digits');
}
