/* farm.c -- the farm's settings, which the server fills at start-up, and
 * its one way back to the server: telling it the queue changed. */
#include "farm/farm.h"

struct farm_settings farm_settings;

void farm_queue_changed(void)
{
	if (farm_settings.queue_changed)
		farm_settings.queue_changed();
}
