import { type TSchema, Type } from '@sinclair/typebox';
import { describe, expect, it } from 'vitest';
import type { Route } from '../platform/route.js';
import { itemLinks, markOptionalInputs } from './openapi.js';

const WithId = Type.Object({ id: Type.String() });
const declared = (operationId: string, method: Route['method'], url: string, response: TSchema = WithId) =>
  ({ operationId, method, url, response }) as unknown as Route;

describe('itemLinks', () => {
  it("links a create to the operations on the item it made, the item's id from the answer", () => {
    const links = itemLinks([
      declared('inboxes.create', 'POST', '/v1/orgs/:org/inboxes'),
      declared('inboxes.list', 'GET', '/v1/orgs/:org/inboxes'),
      declared('inboxes.update', 'PATCH', '/v1/orgs/:org/inboxes/:inbox'),
      declared('inboxes.staff', 'PUT', '/v1/orgs/:org/inboxes/:inbox/staff'),
      // A sub-item needs its own create first: no link.
      declared('inboxes.notes.read', 'GET', '/v1/orgs/:org/inboxes/:inbox/notes/:note'),
      // Nor does removing what is under the item, which only a later call puts there.
      declared('inboxes.staff.delete', 'DELETE', '/v1/orgs/:org/inboxes/:inbox/staff'),
      // Another collection that merely starts the same way.
      declared('inboxes_archive.read', 'GET', '/v1/orgs/:org/inboxes_archive/:id'),
    ]);
    expect(Object.fromEntries(links)).toEqual({
      'inboxes.create': {
        'inboxes.update': {
          operationId: 'inboxes.update',
          parameters: { org: '$request.path.org', inbox: '$response.body#/id' },
        },
        'inboxes.staff': {
          operationId: 'inboxes.staff',
          parameters: { org: '$request.path.org', inbox: '$response.body#/id' },
        },
      },
    });
  });

  it('leaves out creates whose answer has no id, and anything but POST', () => {
    const links = itemLinks([
      declared('tokens.create', 'POST', '/v1/tokens', Type.Object({ token: Type.String() })),
      declared('things.read', 'GET', '/v1/things'),
      declared('tokens.read', 'GET', '/v1/tokens/:token'),
      declared('things.item', 'GET', '/v1/things/:id'),
    ]);
    expect(links.size).toBe(0);
  });

  it('takes the item from the field its create names', () => {
    const upsert = {
      ...declared(
        'orgs.upsert',
        'POST',
        '/v1/orgs',
        Type.Object({ id: Type.String(), external_id: Type.String() }),
      ),
      itemId: 'external_id',
    } as Route;
    const links = itemLinks([upsert, declared('orgs.read', 'GET', '/v1/orgs/:org')]);
    expect(links.get('orgs.upsert')).toEqual({
      'orgs.read': { operationId: 'orgs.read', parameters: { org: '$response.body#/external_id' } },
    });
  });
});

describe('markOptionalInputs', () => {
  it('lets a body field or a parameter with a default, and a body of only such fields, be left out', () => {
    const routeSchema = {
      type: 'object',
      required: ['user_id', 'ttl_seconds'],
      properties: { user_id: { type: 'string' }, ttl_seconds: { type: 'integer', default: 3600 } },
    };
    const document = markOptionalInputs({
      paths: {
        '/v1/tokens': {
          post: {
            parameters: [{ in: 'query', name: 'limit', required: true, schema: { default: 20 } }],
            requestBody: { required: true, content: { 'application/json': { schema: routeSchema } } },
          },
          put: {
            requestBody: {
              required: true,
              content: {
                'application/json': {
                  schema: { required: ['days'], properties: { days: { type: 'integer', default: 30 } } },
                },
              },
            },
          },
        },
      },
    });
    const post = document.paths['/v1/tokens'].post;
    expect(post.requestBody.content['application/json'].schema.required).toEqual(['user_id']);
    expect(post.requestBody.required).toBe(true);
    expect(post.parameters[0]?.required).toBe(false);
    const put = document.paths['/v1/tokens'].put;
    expect(put.requestBody.content['application/json'].schema).not.toHaveProperty('required');
    expect(put.requestBody.required).toBe(false);
    // The route's own schema, which validates requests, is left as declared.
    expect(routeSchema.required).toEqual(['user_id', 'ttl_seconds']);
  });
});
