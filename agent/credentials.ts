// TLS and bearer-token material for one connection attempt. Files are read on every connect, so a
// rotated CA bundle, client certificate or token is used without a restart (the Go agent reads
// them once at start-up: "x509: certificate signed by unknown authority after hub restore").
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import * as grpc from '@grpc/grpc-js';

export interface CredentialFiles {
  caCert: string;
  agentCert: string;
  agentKey: string;
  serviceAccountTokenPath: string;
}

export interface LoadedCredentials {
  channel: grpc.ChannelCredentials;
  /** Changes whenever the CA, certificate or key on disk change (the token is re-read per connect anyway). */
  fingerprint: string;
}

const read = (path: string): Buffer | null => (path ? readFileSync(path) : null);

/** Reads the token for the `authorization` header; trailing newlines would make an invalid header. */
export function readBearerToken(path: string): string {
  return readFileSync(path, 'utf8').trim();
}

export function tlsFingerprint(files: CredentialFiles): string {
  const hash = createHash('sha256');
  for (const path of [files.caCert, files.agentCert, files.agentKey]) hash.update(read(path) ?? '').update('\0');
  return hash.digest('hex').slice(0, 16);
}

export function loadCredentials(files: CredentialFiles): LoadedCredentials {
  const ca = read(files.caCert);
  const cert = read(files.agentCert);
  const key = read(files.agentKey);
  let channel = grpc.credentials.createSsl(ca, key, cert);
  if (files.serviceAccountTokenPath) {
    const tokenPath = files.serviceAccountTokenPath;
    const bearer = grpc.credentials.createFromMetadataGenerator((_params, callback) => {
      try {
        const md = new grpc.Metadata();
        md.set('authorization', `Bearer ${readBearerToken(tokenPath)}`);
        callback(null, md);
      } catch (err) {
        callback(err as Error);
      }
    });
    channel = grpc.credentials.combineChannelCredentials(channel, bearer);
  }
  return { channel, fingerprint: tlsFingerprint(files) };
}
