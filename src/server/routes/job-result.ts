/**
 * How a hosted job's result leaves (spec "Hosted API": `response=json` the hosted job result,
 * `response=image` the first sheet JPEG with `x-vidsheet-job` and `x-credits-remaining`), for every
 * route that runs one (`/v1/vidsheet`, `/v1/videos/{video_id}/sheets`). The JSON itself is built by
 * core/report.ts's `hostedReport` alone.
 */
import type { FastifyReply } from 'fastify';
import type { JobOutcome } from '#vidsheet/core/report.js';
import type { ResponseMode } from '#vidsheet/core/request.js';
import { type HostedJobResult, sheetName } from '../hosted/jobs.js';
import type { SheetStorage } from '../storage/storage.js';

export async function sendJobResult(
  reply: FastifyReply,
  storage: SheetStorage,
  response: ResponseMode,
  result: HostedJobResult,
  report: (outcome: JobOutcome) => object,
) {
  if (response === 'image') {
    const first = await storage.get(result.jobId, sheetName(1));
    if (!first) throw new Error('the first sheet is missing from storage');
    return reply
      .header('x-vidsheet-job', result.jobId)
      .header('x-credits-remaining', String(result.creditsRemaining ?? 0))
      .type('image/jpeg')
      .send(first);
  }
  // Serialised here, in core/report.ts's key order: the response schema's serialiser would move an
  // optional key (a zoom's `window`) after the required ones.
  return reply.type('application/json; charset=utf-8').send(JSON.stringify(report(result.outcome)));
}
