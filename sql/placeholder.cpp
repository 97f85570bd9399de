namespace walhook::sql {}
