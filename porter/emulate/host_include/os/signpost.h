// Apple framework header, by name only (porter_apple.h)
#include "porter_apple.h"
