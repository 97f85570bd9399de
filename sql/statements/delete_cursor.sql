-- The endpoint follows the stream again (sql::cursor_delete): $1 endpoint id.
DELETE FROM walhook.endpoint_cursors WHERE endpoint_id = $1::bigint
