/*
 * Licensed to the Apache Software Foundation (ASF) under one or more
 * contributor license agreements.  See the NOTICE file distributed with
 * this work for additional information regarding copyright ownership.
 * The ASF licenses this file to You under the Apache License, Version 2.0
 * (the "License"); you may not use this file except in compliance with
 * the License.  You may obtain a copy of the License at
 *
 *    http://www.apache.org/licenses/LICENSE-2.0
 *
 * Unless required by applicable law or agreed to in writing, software
 * distributed under the License is distributed on an "AS IS" BASIS,
 * WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
 * See the License for the specific language governing permissions and
 * limitations under the License.
 */

package org.apache.spark.sql.streaming.continuous

import org.apache.spark.sql.execution.streaming.checkpointing.OffsetSeq
import org.apache.spark.sql.execution.streaming.continuous.ContinuousExecution
import org.apache.spark.sql.execution.streaming.sources.{ContinuousMemoryStream, ContinuousMemoryStreamOffset}
import org.apache.spark.tags.SlowSQLTest

@SlowSQLTest
class ContinuousRestartOffsetsSuite extends ContinuousSuiteBase {
  import testImplicits._

  test("restart does not commit an epoch at offsets a previous run reported but did not commit") {
    val input = ContinuousMemoryStream.singlePartition[Int]
    var lastCommitted = -1L

    testStream(input.toDF())(
      // First run: rows 0, 1, 2 delivered and committed, up to some epoch K.
      StartStream(),
      AddData(input, 0, 1, 2),
      CheckAnswer(0, 1, 2),
      StopStream,
      // What a driver killed between writing offsets/K+1 (ContinuousExecution.addOffset) and
      // commits/K+1 (ContinuousExecution.commit) leaves: end offsets for epoch K+1 three rows past
      // the last commit, as if that run had read rows 3, 4, 5. (They are added only after the next
      // run has ended epoch K+1, so that its reader cannot reach them in that epoch.) Any
      // offsets/K+1 the clean stop left is replaced; StreamRealTimeModeSuite edits the logs the
      // same way to simulate this crash.
      Execute { q =>
        lastCommitted = q.commitLog.getLatest().get._1
        q.offsetLog.purgeAfter(lastCommitted)
        assert(q.offsetLog.add(
          lastCommitted + 1, OffsetSeq.fill(ContinuousMemoryStreamOffset(Map(0 -> 6)))))
      },
      // Second run: resumes at epoch K+1 from offsets/K. The trigger's first firing ends epoch K+1
      // at once; nothing new has been added, so this run reads nothing in it and commits it.
      StartStream(longContinuousTrigger),
      Execute { q => q.asInstanceOf[ContinuousExecution].awaitEpoch(lastCommitted + 1) },
      // Rows 3, 4, 5 arrive in epoch K+2, which this run never commits: it stops first.
      AddData(input, 3, 4, 5),
      StopStream,
      // Third run: resumes after the last committed epoch, K+1. Without a purge of the previous
      // run's offsets/K+1 at restart, it starts at row 6 and rows 3, 4, 5 are never delivered.
      StartStream(),
      AddData(input, 6, 7),
      CheckAnswer(0, 1, 2, 3, 4, 5, 6, 7))
  }
}
