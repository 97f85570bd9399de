namespace walhook::relay {}
