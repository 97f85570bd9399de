-- Endpoints that have pending or sending deliveries.
SELECT e.id FROM walhook.endpoints e
 WHERE EXISTS (SELECT 1 FROM walhook.deliveries d
                WHERE d.endpoint_id = e.id AND d.status IN ('pending', 'sending'))
