/** Just enough of an OpenAPI 3.1 document to walk its operations' inputs. */
interface Document {
  paths?: Record<string, Record<string, Operation>>;
}
interface Operation {
  parameters?: { required?: boolean; schema?: Record<string, unknown> }[];
  requestBody?: { required?: boolean; content?: Record<string, { schema?: { required?: string[] } }> };
}

/**
 * Says in the document what the pipeline accepts: a body whose every field is optional may be left
 * out (it reads as {}), and a parameter with a default may be left out (the default is used).
 * @fastify/swagger marks every body and every listed parameter required.
 */
export function markOptionalInputs<D extends object>(document: D): D {
  for (const operations of Object.values((document as Document).paths ?? {})) {
    for (const operation of Object.values(operations)) {
      const body = operation.requestBody;
      if (body && Object.values(body.content ?? {}).every((media) => !media.schema?.required?.length))
        body.required = false;
      for (const parameter of operation.parameters ?? [])
        if (parameter.schema && 'default' in parameter.schema) parameter.required = false;
    }
  }
  return document;
}
