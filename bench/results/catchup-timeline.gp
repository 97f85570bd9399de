set terminal pngcairo size 1000,820 font 'sans,10'
set output 'catchup-timeline.png'
set multiplot layout 2,1 title 'walhook-bench catchup (first run of each)'
set grid
set key top left
set xlabel 'seconds since the load started'
set ylabel 'backlog (deliveries committed − received)'
plot 'data/catchup-from-the-slot-30-000-events-at-3-000-ev-s-while-walhook-is-down-10-s-then-0-ev-s-live-walhook.timeline' using 1:2 with lines lw 2 lc 1 title 'walhook, from the slot: 30,000 events at 3,000 ev/s while walhook is down 10 s, then 0 ev/s live', 'data/catchup-from-the-table-50-000-pending-for-a-down-endpoint-1-000-ev-s-live-over-4-healthy-walhook.timeline' using 1:2 with lines lw 2 lc 2 title 'walhook, from the table: 50,000 pending for a down endpoint, 1,000 ev/s live over 4 healthy'
set ylabel 'slot lag (MiB)'
plot 'data/catchup-from-the-slot-30-000-events-at-3-000-ev-s-while-walhook-is-down-10-s-then-0-ev-s-live-walhook.timeline' using 1:($3 >= 0 ? $3 : 1/0) with lines lw 2 lc 1 title 'walhook, from the slot: 30,000 events at 3,000 ev/s while walhook is down 10 s, then 0 ev/s live (unconfirmed)', 'data/catchup-from-the-slot-30-000-events-at-3-000-ev-s-while-walhook-is-down-10-s-then-0-ev-s-live-walhook.timeline' using 1:($5 >= 0 ? $5 : 1/0) with lines lw 1 dt 2 lc 1 title 'walhook, from the slot: 30,000 events at 3,000 ev/s while walhook is down 10 s, then 0 ev/s live (not yet sent)', 'data/catchup-from-the-table-50-000-pending-for-a-down-endpoint-1-000-ev-s-live-over-4-healthy-walhook.timeline' using 1:($3 >= 0 ? $3 : 1/0) with lines lw 2 lc 2 title 'walhook, from the table: 50,000 pending for a down endpoint, 1,000 ev/s live over 4 healthy (unconfirmed)', 'data/catchup-from-the-table-50-000-pending-for-a-down-endpoint-1-000-ev-s-live-over-4-healthy-walhook.timeline' using 1:($5 >= 0 ? $5 : 1/0) with lines lw 1 dt 2 lc 2 title 'walhook, from the table: 50,000 pending for a down endpoint, 1,000 ev/s live over 4 healthy (not yet sent)'
unset multiplot
